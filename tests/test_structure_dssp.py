"""Secondary structure via mkdssp (HHsearch's secondary structure score): parsing, 3-state reduction, failures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from workflow_lib.errors import ToolError
from workflow_lib.structure import (
    DSSP_STATES,
    mkdssp_version,
    parse_dssp,
    read_chain,
    reduce_to_three,
    run_dssp,
    secondary_structure,
)

DATA = Path(__file__).parent / "data" / "structure"
needs_mkdssp = pytest.mark.skipif(shutil.which("mkdssp") is None, reason="mkdssp not installed")

# Real mkdssp 4.2.2 output (`mkdssp --output-format dssp`, a HEADER line added to the input): two residues of
# docking-benchmark 3BP8_l_u.pdb, then the chain-break line around 2OOB_r_u 939/941 and the insertion-coded
# residue 100A of 3RJQ_r_u (the insertion code sits right before the chain id).
DSSP_EXCERPT = """\
==== Secondary Structure Definition by the program DSSP, NKI version 4.0                           ==== DATE=2026-11-21        .
  #  RESIDUE AA STRUCTURE BP1 BP2  ACC     N-H-->O    O-->H-N    N-H-->O    O-->H-N    TCO  KAPPA ALPHA  PHI   PSI    X-CA   Y-CA   Z-CA
    1   14 A A     >        0   0   39      0, 0.0     4,-2.5     0, 0.0     5,-0.2   0.000 360.0 360.0 360.0 -53.7   79.2  -45.3  -28.9
    2   15 A P  H  >  +     0   0   71      0, 0.0     4,-2.5     0, 0.0     5,-0.2   0.892 360.0  54.8 -62.4 -33.5   79.6  -49.1  -28.4
    9        !              0   0    0      0, 0.0     0, 0.0     0, 0.0     0, 0.0   0.000 360.0 360.0 360.0 360.0    0.0    0.0    0.0
  105  100AA Y  S    S+     0   0  230      3,-0.1     2,-0.3     1,-0.1    -1,-0.1   0.735  76.4   2.7 -86.0 -24.2    1.8   22.3   -7.8
"""


def test_parse_classic_dssp_excerpt():
    records = parse_dssp(DSSP_EXCERPT)
    assert [(r.residue_number, r.chain_id, r.amino_acid, r.state) for r in records] == [
        ("14", "A", "A", "C"), ("15", "A", "P", "H"), ("100A", "A", "Y", "S")]
    with pytest.raises(ValueError, match="RESIDUE"):
        parse_dssp("not dssp\n")


def test_reduce_to_three_states():
    assert reduce_to_three("HGIEBTSPC-") == "HHHEECCCC-"
    assert set(DSSP_STATES) == set("HGIEBTSPC")
    with pytest.raises(ValueError, match="not a DSSP state"):
        reduce_to_three("HQ")


@needs_mkdssp
def test_mkdssp_version_is_reported():
    version = mkdssp_version()
    assert version is not None and "mkdssp version" in version


@needs_mkdssp
def test_globin_is_mostly_helix_and_matches_run_dssp_on_the_file():
    chain = read_chain(DATA / "d1mbaa_.pdb.gz", "A")
    ss = secondary_structure(chain)
    assert len(ss.ss8) == len(ss.ss3) == len(chain)
    assert ss.ss3 == reduce_to_three(ss.ss8)
    assert ss.ss3.count("H") / len(chain) > 0.7 and "E" not in ss.ss3  # an all-α globin
    by_number = {r.residue_number: r.state for r in run_dssp(DATA / "d1mbaa_.pdb.gz")}
    assert ss.ss8 == "".join(by_number[number] for number in chain.residue_numbers)


@needs_mkdssp
def test_beta_rich_vhh_has_strands_and_chain_without_n_gets_states():
    vhh = secondary_structure(read_chain(DATA / "3RJQ_r_u.pdb.gz", "A"))  # an immunoglobulin fold
    assert vhh.ss3.count("E") / len(vhh.ss3) > 0.3
    # blank chain id: mkdssp rejects the raw file, the chain written by us is fine
    with pytest.raises(ToolError, match="mkdssp failed"):
        run_dssp(DATA / "1ACB_l_u.pdb.gz")
    chain = read_chain(DATA / "1ACB_l_u.pdb.gz", "")
    ss = secondary_structure(chain)
    assert len(ss.ss8) == len(chain) and set(ss.ss8) <= set(DSSP_STATES + "-")


@needs_mkdssp
def test_mkdssp_failure_is_a_tool_error(tmp_path):
    empty = tmp_path / "no_atoms.pdb"
    empty.write_text("HEADER    NOTHING\nEND\n")
    with pytest.raises(ToolError, match="no_atoms.pdb"):
        run_dssp(empty)


def test_missing_mkdssp(tmp_path):
    chain = read_chain(DATA / "2OOB_r_u.pdb", "A")
    with pytest.raises(ToolError, match="not found"):
        secondary_structure(chain, executable="no-such-mkdssp")
    unknown = secondary_structure(chain, executable="no-such-mkdssp", on_missing_tool="unknown")
    assert unknown.ss8 == unknown.ss3 == "-" * len(chain)
    assert mkdssp_version("no-such-mkdssp") is None
    with pytest.raises(ValueError, match="on_missing_tool"):
        secondary_structure(chain, on_missing_tool="guess")
