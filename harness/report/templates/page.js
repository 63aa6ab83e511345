// The page's one script (no network, nothing loaded): the compare control beside each frame grid.
// Without it the grids, difference images and players work as they are; the control stays hidden.
(function () {
  "use strict";
  function imagesOf(table) {
    var map = {};
    table.querySelectorAll("img[data-run]").forEach(function (img) {
      map[img.dataset.run + "|" + img.dataset.frame + "|" + img.dataset.kind] = img;
    });
    return map;
  }
  function setImage(target, source, alt) {
    if (source) {
      target.src = source.src;
      target.alt = alt;
      target.hidden = false;
    } else {
      target.removeAttribute("src");
      target.alt = alt + ": not available";
      target.hidden = true;
    }
  }
  document.querySelectorAll(".compare[data-grid]").forEach(function (box) {
    var table = document.getElementById(box.dataset.grid);
    if (!table) { return; }
    var images = imagesOf(table);
    var ref = box.dataset.reference;
    var runSel = box.querySelector("select.run");
    var frameSel = box.querySelector("select.frame");
    var stage = box.querySelector(".stage");
    var base = stage.querySelector("img.base");
    var top = stage.querySelector("img.top");
    var diff = stage.querySelector("img.diffview");
    var pos = box.querySelector("input.pos");
    var flip = box.querySelector("button.flip");
    var state = box.querySelector(".state");
    var showing = "run";
    function mode() {
      var checked = box.querySelector("input.mode:checked");
      return checked ? checked.value : "slider";
    }
    function update() {
      var run = runSel.value, frame = frameSel.value, m = mode();
      setImage(base, images[ref + "|" + frame + "|frame"], "reference " + ref + ", frame " + frame);
      setImage(top, images[run + "|" + frame + "|frame"], run + ", frame " + frame);
      setImage(diff, images[run + "|" + frame + "|diff"], "difference of " + run + " to " + ref + ", frame " + frame);
      stage.dataset.mode = m;
      stage.dataset.showing = showing;
      stage.style.setProperty("--pos", pos.value + "%");
      pos.hidden = m !== "slider";
      flip.hidden = m !== "flip";
      if (m === "slider") {
        state.textContent = "left of the line: " + ref + " (reference); right: " + run;
      } else if (m === "flip") {
        state.textContent = "showing " + (showing === "ref" ? ref + " (reference)" : run) + "; flip (or the F key) for the other";
      } else {
        state.textContent = "|" + run + " - " + ref + "| amplified, colour scale above the grid";
      }
    }
    function toggle() {
      showing = showing === "ref" ? "run" : "ref";
      update();
    }
    runSel.addEventListener("change", update);
    frameSel.addEventListener("change", update);
    pos.addEventListener("input", update);
    box.querySelectorAll("input.mode").forEach(function (r) { r.addEventListener("change", update); });
    flip.addEventListener("click", toggle);
    box.addEventListener("keydown", function (e) {
      if ((e.key === "f" || e.key === "F") && mode() === "flip" && e.target.tagName !== "SELECT") { toggle(); }
    });
    table.querySelectorAll("img[data-run]").forEach(function (img) {
      if (img.dataset.run === ref) { return; }
      img.classList.add("pickable");
      img.title = "open in the compare control";
      img.addEventListener("click", function () {
        runSel.value = img.dataset.run;
        frameSel.value = img.dataset.frame;
        update();
        box.scrollIntoView({block: "nearest"});
      });
    });
    box.hidden = false;
    update();
  });
})();
