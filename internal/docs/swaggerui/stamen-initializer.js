// The spec is served next to /docs, so a relative URL keeps working under
// --url_prefix and behind proxies.
window.onload = function () {
  var base = window.location.pathname.replace(/\/docs\/?(index\.html)?$/, "");
  window.ui = SwaggerUIBundle({
    url: base + "/swagger.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: "StandaloneLayout",
    persistAuthorization: true
  });
};
