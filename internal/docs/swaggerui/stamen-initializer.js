// The spec is served next to /docs, so a relative URL keeps working under
// --url_prefix and behind proxies.
window.onload = function () {
  var base = window.location.pathname.replace(/\/docs\/?(index\.html)?$/, "");
  var origin = window.location.origin;
  window.ui = SwaggerUIBundle({
    url: base + "/swagger.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: "StandaloneLayout",
    persistAuthorization: true,
    // Swagger UI's default shows a badge that loads
    // https://validator.swagger.io/validator?url=<this spec's URL> on any
    // host but localhost: it tells a third party where stamen runs, and
    // offline it is a broken image.
    validatorUrl: null,
    // The spec's basePath is "/", so under --url_prefix the calls of "Try
    // it out" would miss the prefix the operations are served under.
    requestInterceptor: function (req) {
      if (base && !req.loadSpec && req.url.indexOf(origin + "/") === 0) {
        req.url = origin + base + req.url.slice(origin.length);
      }
      return req;
    }
  });
};
