"""The report in a real browser: the workflow runs on a small real case, then headless Chromium opens a protein page
and the proteome index and checks that the 3D viewer drew a non-blank image, that the figures decode, and that
the index table sorts and filters.

The case: 1KT6_A (a lipocalin) with trackfold's own MSA of it and a template database of 50 PDB chains of
ProMod3's archive that holds its ten best template hits (tests/data/templates/promod3_slice), plus one E. coli
protein searched against 150 real Swiss-Prot sequences (example/). Chromium is Debian's ``chromium`` package;
the test is skipped, with that reason, where it is not installed. WebGL runs in software (SwiftShader).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from test_workflow import SNAKEMAKE, _snakemake
from workflow_lib.seqio.fasta import read_fasta

CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake is not installed"),
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium (Debian: apt-get install chromium)"),
]
FLAGS = ("--headless", "--no-sandbox", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
         "--allow-file-access-from-files", "--virtual-time-budget=10000")

PROBE = """<!DOCTYPE html><html><body><pre id="out">pending</pre>
<iframe id="page" src="%(page)s" width="1100" height="900"></iframe>
<script>
function done(result) { document.getElementById("out").textContent = "RESULT " + JSON.stringify(result); }
function decoded(sources, callback) {
  var sizes = [], left = sources.length;
  if (!left) { callback(sizes); }
  sources.forEach(function (src, i) {
    var image = new Image();
    image.onload = function () { sizes[i] = [image.width, image.height]; if (!--left) { callback(sizes); } };
    image.onerror = function () { sizes[i] = [0, 0]; if (!--left) { callback(sizes); } };
    image.src = src;
  });
}
var frame = document.getElementById("page");
frame.addEventListener("load", function () { setTimeout(function () {
  try { %(body)s } catch (error) { done({error: String(error)}); }
}, 500); });
</script></body></html>
"""

PROTEIN_PROBE = """
var win = frame.contentWindow, doc = frame.contentDocument, result = {};
result.status = doc.getElementById("viewer").getAttribute("data-status");
var svgImages = Array.prototype.map.call(doc.querySelectorAll("svg image"), function (im) { return im.href.baseVal; });
decoded(svgImages, function (sizes) {
  result.figures = sizes;
  var shot = new Image();
  shot.onload = function () {
    var canvas = document.createElement("canvas"); canvas.width = shot.width; canvas.height = shot.height;
    var context = canvas.getContext("2d"); context.drawImage(shot, 0, 0);
    var data = context.getImageData(0, 0, canvas.width, canvas.height).data, ink = 0, blue = 0;
    for (var i = 0; i < data.length; i += 4) {
      if (data[i] < 235 || data[i + 1] < 235 || data[i + 2] < 235) { ink++; }
      if (data[i + 2] > data[i] + 60) { blue++; }
    }
    result.pixels = canvas.width * canvas.height; result.ink = ink; result.blue = blue;
    var box = doc.getElementById("show-template");
    result.template_toggle = !!box;
    done(result);
  };
  shot.src = win.trackfoldViewer.pngURI();
});
"""

INDEX_PROBE = """
var doc = frame.contentDocument, result = {};
var holder = doc.getElementById("protein-table");
result.status = holder.getAttribute("data-status");
function names() {
  return Array.prototype.map.call(doc.querySelectorAll("table.proteins tbody tr"),
                                  function (tr) { return tr.cells[0].textContent; });
}
result.rows = names();
var plddt = doc.querySelector("th[data-key=mean_plddt]");
plddt.click();
result.sorted_descending = names();
var search = doc.querySelector("input[type=search]");
search.value = "insa9";
search.dispatchEvent(new Event("input"));
result.filtered = names();
result.info = doc.querySelector(".table-info").textContent;
search.value = "";
search.dispatchEvent(new Event("input"));
var minimum = doc.querySelector("input[aria-label='mean pLDDT min']");
minimum.value = "70";
minimum.dispatchEvent(new Event("input"));
result.confident = names();
result.links = Array.prototype.map.call(doc.querySelectorAll("table.proteins tbody a"),
                                        function (a) { return a.getAttribute("href"); });
decoded(Array.prototype.map.call(doc.querySelectorAll(".overview img"), function (im) { return im.src; }),
        function (sizes) { result.figures = sizes; done(result); });
"""


def _chromium(*args: str, timeout: float = 120.0) -> str:
    completed = subprocess.run([CHROMIUM, *FLAGS, *args], capture_output=True, text=True, timeout=timeout)
    return completed.stdout


def _probe(folder: Path, page: Path, body: str) -> dict:
    harness = folder / f"probe_{page.stem}.html"
    harness.write_text(PROBE % {"page": page.as_uri(), "body": body})
    dom = _chromium("--dump-dom", harness.as_uri())
    match = re.search(r"RESULT (\{.*\})", dom)
    assert match, f"the probe page did not finish:\n{dom[-2000:]}"
    return json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@pytest.fixture(scope="module")
def report(root, data_dir, tmp_path_factory) -> Path:
    """The report folder of a real workflow run (see the module docstring)."""
    folder = tmp_path_factory.mktemp("browser")
    (folder / "msas").mkdir()
    a3m = data_dir / "templates" / "promod3_slice" / "1KT6_A.a3m"
    shutil.copy(a3m, folder / "msas" / "1KT6_A.a3m")
    query = a3m.read_text().split("\n")[1].strip()
    other = read_fasta(root / "example" / "proteomes" / "ecoli_slice.fasta")[0]
    (folder / "proteome.fasta").write_text(f">1KT6_A\n{query}\n>{other.id}\n{other.sequence}\n")
    with gzip.open(root / "example" / "db" / "sprot_firmicutes_slice.fasta.gz", "rt") as handle:
        text = handle.read()
    (folder / "db.fasta").write_text(">" + ">".join(text.split(">")[1:151]))
    config = {"results": "results", "proteomes": {"demo": "proteome.fasta"},
              "databases": {"db": {"fasta": ["db.fasta"], "shards": 1}},
              "search": {"iterations": 1, "precomputed_msas": "msas"}, "chunks": {"proteins_per_chunk": 4},
              "templates": {"name": "slice", "search_msas": False,
                            "structures": [str(data_dir / "templates" / "promod3_slice" / "backbone.npz")]}}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    _snakemake(root, folder, "--cores", "1", "--configfile", str(folder / "config.yaml"))
    return folder / "results" / "demo" / "report"


def test_protein_page_draws_the_model_in_3d_with_its_figures(report, tmp_path):
    page = report / "proteins" / "1KT6_A.html"
    result = _probe(tmp_path, page, PROTEIN_PROBE)
    assert result.get("status") == "drawn", result
    # The cartoon covers a good part of the canvas (measured: 10% of the pixels are not background) and is
    # coloured by pLDDT: 61% of those pixels are blue for this confident model (the two blue bands), 0% for the
    # other protein's (all orange and yellow). An empty or failed view has no ink at all.
    assert result["ink"] > 0.02 * result["pixels"], result
    assert result["blue"] > 0.3 * result["ink"], result
    assert result["template_toggle"], result
    # MSA coverage and contact map: each embedded PNG decodes to a non-empty image.
    assert len(result["figures"]) == 2 and all(w > 0 and h > 0 for w, h in result["figures"]), result
    shot = tmp_path / "protein.png"
    _chromium("--window-size=1200,1800", f"--screenshot={shot}", page.as_uri())
    assert shot.stat().st_size > 20_000


def test_index_sorts_filters_and_links_every_protein(report, tmp_path):
    result = _probe(tmp_path, report / "index.html", INDEX_PROBE)
    assert result.get("status") == "ready", result
    ecoli = next(name for name in result["rows"] if name != "1KT6_A")
    assert sorted(result["rows"]) == sorted(["1KT6_A", ecoli])
    # The model from a 100%-identical template is confident, the other protein's is not: the pLDDT sort and the
    # pLDDT > 70 filter both put 1KT6_A first / alone.
    assert result["sorted_descending"] == ["1KT6_A", ecoli], result
    assert result["confident"] == ["1KT6_A"], result
    assert result["filtered"] == [ecoli] and result["info"].startswith("1 of 2 proteins match"), result
    assert result["links"] == ["proteins/1KT6_A.html"]
    assert (report / "proteins" / "1KT6_A.html").exists()
    assert len(result["figures"]) == 2 and all(w > 0 for w, _ in result["figures"]), result
