// trackfold protein page: the model in 3D (3Dmol.js), coloured by pLDDT in AlphaFold DB's four bands, with the
// top template's superposed Ca trace behind a checkbox. The coordinates are inline (window.TRACKFOLD_MODEL,
// window.TRACKFOLD_TEMPLATE) so the page works from disk. The viewer element's data-status says what happened:
// "drawn", "no-webgl" or "error: ...".
(function () {
  "use strict";
  var BANDS = [[90, "#0053d6"], [70, "#65cbf3"], [50, "#ffdb13"], [-1, "#ff7d45"]];
  function bandColour(atom) {
    for (var i = 0; i < BANDS.length; i++) {
      if (atom.b > BANDS[i][0]) { return BANDS[i][1]; }
    }
    return BANDS[BANDS.length - 1][1];
  }
  var element = document.getElementById("viewer");
  if (!element) { return; }
  function fail(status, message) {
    element.setAttribute("data-status", status);
    element.innerHTML = "<p class=\"viewer-message\">" + message + "</p>";
  }
  if (typeof $3Dmol === "undefined") {
    fail("error: 3Dmol.js not loaded", "The 3D viewer (assets/3Dmol-min.js) did not load.");
    return;
  }
  var viewer;
  try {
    viewer = $3Dmol.createViewer(element, {backgroundColor: "white", antialias: true});
  } catch (error) {
    viewer = null;
  }
  if (!viewer) {
    fail("no-webgl", "This browser cannot show the 3D view (WebGL is off); the model is in the PDB and mmCIF files.");
    return;
  }
  try {
    var model = viewer.addModel(window.TRACKFOLD_MODEL, "pdb");
    model.setStyle({}, {cartoon: {colorfunc: bandColour, arrows: true}});
    viewer.setHoverable({}, true, function (atom, v) {
      if (!atom.label) {
        atom.label = v.addLabel(atom.resn + " " + atom.resi + "  pLDDT " + atom.b.toFixed(1),
                                {position: atom, backgroundColor: "#333", fontSize: 12});
      }
    }, function (atom, v) {
      if (atom.label) { v.removeLabel(atom.label); delete atom.label; }
    });
    var template = null;
    var box = document.getElementById("show-template");
    if (window.TRACKFOLD_TEMPLATE && box) {
      template = viewer.addModel(window.TRACKFOLD_TEMPLATE, "pdb");
      template.setStyle({}, {});
      box.addEventListener("change", function () {
        template.setStyle({}, box.checked ? {cartoon: {style: "trace", color: "#8c8c8c", thickness: 0.35,
                                                       opacity: 0.85}} : {});
        viewer.render();
      });
    }
    var reset = document.getElementById("reset-view");
    if (reset) {
      reset.addEventListener("click", function () { viewer.zoomTo({model: model}); viewer.render(); });
    }
    viewer.zoomTo({model: model});
    viewer.render();
    window.trackfoldViewer = viewer;
    element.setAttribute("data-status", "drawn");
  } catch (error) {
    fail("error: " + error, "The 3D view failed: " + error);
  }
})();
