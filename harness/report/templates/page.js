// The page's one script (no network, nothing loaded): the compare control beside each frame grid.
// Without it the grids, difference images and players work as they are; the control stays hidden.
// The frame list offers, for the run chosen, the frames it has (the evenly spaced ones and its own
// worst frames, labelled); "#compare?run=R&frame=worst-psnr|worst-ssim|N&mode=slider|flip|diff"
// (each part optional) opens a control there (class "linked"), so a link or a screenshot can show
// the worst frame.
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
  var controls = [];
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
      var chosen = frameSel.options[frameSel.selectedIndex];
      var where = "frame " + (chosen ? chosen.textContent : frame) + ": ";
      if (m === "slider") {
        state.textContent = where + "left of the line: " + ref + " (reference); right: " + run;
      } else if (m === "flip") {
        state.textContent = where + "showing " + (showing === "ref" ? ref + " (reference)" : run) + "; flip (or the F key) for the other";
      } else {
        state.textContent = where + "|" + run + " - " + ref + "| amplified, colour scale above the grid";
      }
    }
    function worstOf(run) {
      var opt = runSel.querySelector('option[value="' + CSS.escape(run) + '"]');
      return {PSNR: opt ? opt.dataset.worstPsnr : undefined, SSIM: opt ? opt.dataset.worstSsim : undefined};
    }
    // The frames the run has, each named with the metrics it is the run's worst frame by.
    function relabel() {
      var run = runSel.value, worst = worstOf(run), firstFree = null;
      frameSel.querySelectorAll("option").forEach(function (opt) {
        var i = opt.value, marks = [];
        if (worst.PSNR === i) { marks.push("PSNR"); }
        if (worst.SSIM === i) { marks.push("SSIM"); }
        opt.textContent = i + (marks.length ? " (worst " + marks.join(" and ") + ")" : "");
        opt.disabled = !images[run + "|" + i + "|frame"];
        if (!opt.disabled && firstFree === null) { firstFree = i; }
      });
      var current = frameSel.querySelector('option[value="' + CSS.escape(frameSel.value) + '"]');
      if (!current || current.disabled) { frameSel.value = worst.PSNR || firstFree; }
    }
    function pickRun(run) {
      runSel.value = run;
      relabel();
    }
    // frame: an index, or "worst-psnr" / "worst-ssim" of the run shown
    function show(frame, m) {
      var worst = worstOf(runSel.value);
      var i = frame === "worst-psnr" ? worst.PSNR : frame === "worst-ssim" ? worst.SSIM : frame;
      var opt = i === undefined ? null : frameSel.querySelector('option[value="' + CSS.escape(i) + '"]');
      if (opt && !opt.disabled) { frameSel.value = i; }
      var radio = m ? box.querySelector('input.mode[value="' + CSS.escape(m) + '"]') : null;
      if (radio) { radio.checked = true; }
      update();
    }
    function toggle() {
      showing = showing === "ref" ? "run" : "ref";
      update();
    }
    runSel.addEventListener("change", function () { relabel(); update(); });
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
        pickRun(img.dataset.run);
        frameSel.value = img.dataset.frame;
        update();
        box.scrollIntoView({block: "nearest"});
      });
    });
    box.hidden = false;
    relabel();
    update();
    controls.push({box: box, runs: runSel, pickRun: pickRun, show: show});
  });
  // "#compare?run=...&frame=...&mode=...": the control of that run (else the first) opened there.
  function fromHash() {
    var hash = decodeURIComponent(location.hash.slice(1));
    if (hash !== "compare" && hash.indexOf("compare?") !== 0) { return; }
    var q = new URLSearchParams(hash.slice("compare".length + 1));
    var run = q.get("run");
    var c = controls.filter(function (x) {
      return !run || x.runs.querySelector('option[value="' + CSS.escape(run) + '"]');
    })[0];
    if (!c) { return; }
    if (run) { c.pickRun(run); }
    c.show(q.get("frame") || "worst-psnr", q.get("mode"));
    controls.forEach(function (x) { x.box.classList.toggle("linked", x === c); });
    c.box.scrollIntoView({block: "start"});
  }
  window.addEventListener("hashchange", fromHash);
  fromHash();
})();
