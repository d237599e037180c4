// The spec is served next to /docs, so a URL built from the page's own path
// keeps working under --url_prefix and behind proxies.
window.onload = function () {
  // The path the page was loaded from, minus /docs: where this browser
  // reaches stamen's root. stamen serves the spec with --url_prefix as its
  // basePath, but a reverse proxy may serve that prefix (or the root) under
  // another path, which only the page's own URL tells.
  var base = window.location.pathname.replace(/\/docs\/?(index\.html)?$/, "");
  var specURL = new URL(base + "/swagger.json", window.location.href).href;
  window.ui = SwaggerUIBundle({
    url: specURL,
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
    // stamen's own spec gets the page's base as its basePath, replacing
    // the served one, so that "Try it out" (and the URL and curl command it
    // shows) calls the operations where this browser reaches them. Another
    // spec loaded in the explore bar is left as it is.
    responseInterceptor: function (res) {
      if (res.url !== specURL || !res.ok || typeof res.text !== "string") {
        return res;
      }
      try {
        var spec = JSON.parse(res.text);
        spec.basePath = base || "/";
        res.text = JSON.stringify(spec);
        res.data = res.text;
        res.body = spec;
        res.obj = spec;
      } catch (e) {
        // Not JSON: Swagger UI reports it as it would have.
      }
      return res;
    }
  });
};
