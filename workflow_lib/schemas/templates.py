"""The template database files and the template-hits table, declared once.

A template database directory (``results/templates/{template_db}/``) holds

- ``chains.parquet`` (:data:`TEMPLATE_CHAINS`): one row per template chain: ID, source, the *profile
  sequence* (the sequence the template is searched and aligned by: the A3M query when the chain's profile came
  from an MSA, which may be the full SEQRES, else the observed chain sequence), the observed *structure
  sequence*, DSSP states, profile provenance, and the offsets of the chain's rows in the arrays below;
- ``arrays.npz`` (:data:`TEMPLATE_ARRAYS`): coordinates of every observed residue (N, CA, C, O, CB), their
  atom masks, the map from profile positions to observed residues, and every chain's profile HMM;
- ``manifest.json``: written last; see :mod:`workflow_lib.templates.build`.

Named dimensions of :data:`TEMPLATE_ARRAYS`: ``C`` chains, ``P`` profile positions of all chains
(Σ P_k), ``Q`` = P + C transition rows (each profile has P_k + 1 rows, row 0 the begin state), ``R`` observed
residues of all chains (Σ R_k). Chain k owns rows ``profile_offset[k] : profile_offset[k] + length[k]`` of
the P arrays, ``profile_offset[k] + k : … + length[k] + 1`` of the Q arrays and
``coord_offset[k] : coord_offset[k] + structure_length[k]`` of the R arrays.
"""

from __future__ import annotations

import pyarrow as pa

from workflow_lib.schemas.io import ArraySpec, NpzSchema, TableSchema

TEMPLATE_ATOMS = ("N", "CA", "C", "O", "CB")
"""Atom order of ``coords``/``atom_mask`` (CB as in the file: NaN for glycine and missing side chains)."""

TEMPLATE_CHAINS = TableSchema("template_chains", 1, pa.schema([
    ("template", pa.string()),           # unique template ID: {entry}_{chain_id} (workflow_lib.structure Chain.name)
    ("entry", pa.string()),              # structure file name without extensions
    ("chain_id", pa.string()),           # author chain ID ("" when blank)
    ("source", pa.string()),             # the structure file as given on the command line
    ("sequence", pa.string()),           # profile sequence (length = `length`)
    ("length", pa.int32()),              # profile positions P_k
    ("structure_sequence", pa.string()),  # observed residues, file order (length = structure_length)
    ("structure_length", pa.int32()),    # R_k
    ("residue_numbers", pa.string()),    # author numbers of the observed residues, space-separated
    ("ss8", pa.string()),                # DSSP 8-state per observed residue ('-' unknown), see structure.dssp
    ("ss3", pa.string()),                # H/E/C reduction ('-' unknown)
    ("profile_source", pa.string()),     # 'single-sequence' or 'a3m:<path>'
    ("neff", pa.float32()),              # the profile's Neff
    ("profile_offset", pa.int64()),      # first row of the chain in the P arrays
    ("coord_offset", pa.int64()),        # first row of the chain in the R arrays
]), "Template chains of a template database (workflow_lib.schemas.templates).")

TEMPLATE_ARRAYS = NpzSchema("template_arrays", 1, {
    "coords": ArraySpec("float32", ("R", 5, 3), "N, CA, C, O, CB of every observed residue (Å), NaN if missing"),
    "atom_mask": ArraySpec("bool", ("R", 5), "atom present"),
    "residue_map": ArraySpec("int32", ("P",), "profile position -> observed residue of the chain (local), -1"),
    "emissions": ArraySpec("float32", ("P", 20), "match emissions with pseudocounts"),
    "transitions": ArraySpec("float32", ("Q", 7), "linear transitions, P_k + 1 rows per chain (row 0 = begin)"),
    "column_neff": ArraySpec("float32", ("Q", 3), "Neff of M, I, D per transition row"),
    "background": ArraySpec("float32", ("C", 20), "null model of each profile"),
}, "Coordinates and profiles of a template database (workflow_lib.schemas.templates).")

TEMPLATE_HITS = TableSchema("template_hits", 1, pa.schema([
    ("query", pa.string()),              # query name (the A3M's stem: the protein's safe ID in the workflow)
    ("template", pa.string()),           # template ID in the template database
    ("rank", pa.int16()),                # 1 = best (ascending E-value, then descending bit score)
    ("evalue", pa.float64()),            # expected unrelated templates scoring this high in a DB of db_size
    ("pvalue", pa.float64()),            # P(score >= bitscore) for one unrelated template of this length
    ("significance", pa.float32()),      # exp(-evalue): P(no unrelated template in the DB scores this high)
    ("bitscore", pa.float32()),          # Viterbi score, bits (no correlation score; see templates.search)
    ("identity", pa.float32()),          # identical residues / aligned columns
    ("similarity", pa.float32()),        # aligned pairs with positive substitution log-odds / aligned columns
    ("aligned_cols", pa.int32()),        # match (MM) steps
    ("qstart", pa.int32()),              # 1-based, inclusive, over the query's match columns
    ("qend", pa.int32()),
    ("tstart", pa.int32()),              # 1-based, inclusive, over the template's profile positions
    ("tend", pa.int32()),
    ("qlen", pa.int32()),
    ("tlen", pa.int32()),
    ("alignment", pa.string()),          # state string: M match, I/D query column only, J/G template column only
    ("template_db", pa.string()),        # the template database directory
    ("db_size", pa.int32()),             # number of templates searched (the E-value's N)
    ("null_lambda", pa.float32()),       # fitted null model of this query (see templates.calibration)
    ("null_mu", pa.float32()),
]), "Template hits of one query against a template database (workflow_lib.schemas.templates).")


TEMPLATE_SEARCH_STATS = TableSchema("template_search_stats", 1, pa.schema([
    ("protein", pa.string()),            # the query (A3M stem: the protein's safe ID in the workflow)
    ("hits", pa.int32()),                # rows of its {protein}.hits.parquet
    ("best_template", pa.string()),      # rank-1 template; null without hits
    ("best_evalue", pa.float64()),
    ("best_identity", pa.float32()),
    ("seconds", pa.float64()),           # wall time of this query's search
]), "Per protein of one template-search job (a chunk): its hits in brief; written after every hits table.")
