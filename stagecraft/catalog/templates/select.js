// "Which tag for my machine": looks answers up in the table build.py catalog embedded
// (#answers); it decides nothing itself. The driver is mapped to the greatest driver of
// the table's grid at or below it: the chooser compares drivers with those values only.
"use strict";
(function () {
  var table = JSON.parse(document.getElementById("answers").textContent);
  var choices = JSON.parse(document.getElementById("choices").textContent);
  var $ = function (id) { return document.getElementById(id); };

  function el(tag, text, attrs) {
    var e = document.createElement(tag);
    if (text) { e.textContent = text; }
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    return e;
  }

  function version(text) {
    var m = String(text).trim().match(/^\d+(\.\d+)*/);
    return m ? m[0].split(".").map(Number) : null;
  }

  function atMost(a, b) {  // version a <= version b
    for (var i = 0; i < Math.max(a.length, b.length); i++) {
      var x = a[i] || 0, y = b[i] || 0;
      if (x !== y) { return x < y; }
    }
    return true;
  }

  function floorDriver(text) {
    var v = version(text);
    if (!v) { return null; }
    var best = null;
    table.grid.forEach(function (g) { if (atMost(version(g), v)) { best = g; } });
    return best;
  }

  function fillCpus() {
    var platform = $("platform").value, cpu = $("cpu"), keep = cpu.value;
    cpu.textContent = "";
    choices.cpus.forEach(function (c) {
      if (c.platform === platform) { cpu.appendChild(el("option", c.label, {value: c.key})); }
    });
    if (keep) { cpu.value = keep; }
    if (!cpu.value && cpu.options.length) { cpu.selectedIndex = cpu.options.length - 1; }
  }

  function fillGpus() {
    var gpu = $("gpu");
    gpu.appendChild(el("option", "no NVIDIA GPU", {value: "none"}));
    var models = el("optgroup", null, {label: "by model"});
    choices.gpus.forEach(function (g) { models.appendChild(el("option", g.label, {value: g.cc + "|" + g.name})); });
    gpu.appendChild(models);
    var ccs = el("optgroup", null, {label: "by compute capability"});
    choices.ccs.forEach(function (c) { ccs.appendChild(el("option", "cc " + c.cc + " (" + c.generation + ")", {value: c.cc + "|"})); });
    gpu.appendChild(ccs);
  }

  function tagLink(tag) {
    var a = el("a", tag, {href: choices.tags[tag] || "index.html"});
    return a;
  }

  function show() {
    var out = $("answer"), cc = $("gpu").value.split("|")[0], cpu = $("cpu").value, driver = "";
    out.textContent = "";
    $("driver").disabled = cc === "none";
    if (cc !== "none") {
      driver = floorDriver($("driver").value);
      if (!driver) {
        out.appendChild(el("p", "Driver " + $("driver").value + " is not in the table (it starts at " + table.grid[0] + "): type a version such as 550.54.15.", {"class": "flag-box", id: "answer-error"}));
        return;
      }
    }
    var row = table.answers[cpu + "|" + cc + "|" + driver];
    if (!row) {
      out.appendChild(el("p", "This machine is not in the table.", {"class": "flag-box", id: "answer-error"}));
      return;
    }
    var s = table.strings, best = el("p", null, {id: "best"});
    if (row[0] >= 0) {
      best.appendChild(el("strong", "Best tag: "));
      best.appendChild(tagLink(s[row[0]]));
      best.setAttribute("data-tag", s[row[0]]);
    } else {
      best.appendChild(el("strong", "No tag fits this machine."));
      best.setAttribute("data-tag", "");
    }
    out.appendChild(best);
    out.appendChild(el("p", "Why: " + s[row[1]], {id: "why"}));
    if (driver) {
      out.appendChild(el("p", "Driver " + $("driver").value.trim() + " answers as " + driver +
                          ", the table's step at or below it: no answer changes between steps.", {id: "driver-step"}));
    }
    if (row[2].length) {
      out.appendChild(el("h2", "The other tags"));
      var ul = el("ul", null, {id: "others"});
      row[2].forEach(function (o) {
        var li = el("li");
        li.appendChild(tagLink(s[o[0]]));
        li.appendChild(document.createTextNode(": " + s[o[1]]));
        ul.appendChild(li);
      });
      out.appendChild(ul);
    }
  }

  fillGpus();
  fillCpus();
  $("platform").addEventListener("change", function () { fillCpus(); show(); });
  ["cpu", "gpu"].forEach(function (id) { $(id).addEventListener("change", show); });
  $("driver").addEventListener("input", show);
  show();
}());
