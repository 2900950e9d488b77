"""``trackfold evaluate``'s tables: ``evaluation.parquet`` (:data:`EVALUATION`) and
``evaluation_residues.parquet`` (:data:`EVALUATION_RESIDUES`)."""

from __future__ import annotations

import pyarrow as pa

from workflow_lib.schemas.io import TableSchema

EVALUATION = TableSchema("evaluation", 1, pa.schema([
    ("name", pa.string()),
    ("pred", pa.string()),               # predicted model (PDB)
    ("native", pa.string()),             # experimental structure (PDB/mmCIF)
    ("native_chain", pa.string()),       # chain evaluated against
    ("length", pa.int32()),              # residues of the prediction
    ("native_length", pa.int32()),       # observed native residues (with a Cα)
    ("aligned", pa.int32()),             # prediction residues matched to native residues
    ("seq_identity", pa.float64()),      # identical / aligned
    ("lddt_ca", pa.float64()),           # global lDDT-Cα of the matched residues, 0-1
    ("tm_score", pa.float64()),          # TM-align (sequence-independent), normalised by native_length
    ("tm_score_fixed", pa.float64()),    # TM-score with the residue matching fixed, normalised by native_length
    ("rmsd", pa.float64()),              # TM-align RMSD (Å) over its aligned pairs
    ("tm_aligned", pa.float64()),        # TM-align aligned length
    ("rmsd_all", pa.float64()),          # Kabsch Cα RMSD (Å) over all matched residues
    ("tmalign_status", pa.string()),     # ok | why TM-align values are NaN
    ("mean_plddt", pa.float64()),        # over all predicted residues, 0-100
    ("plddt_lddt_pearson", pa.float64()),
    ("plddt_mae", pa.float64()),         # mean |pLDDT/100 - lDDT-Cα|
    ("long_contacts", pa.int32()),       # true long-range contacts among scorable pairs
    ("random_p_long", pa.float64()),     # long_contacts / scorable long-range pairs: a random ranking's precision
    ("p_l5_long", pa.float64()),         # distogram contact precision, top L/5, |i-j| >= 24
    ("p_l_long", pa.float64()),          # top L
    ("coevo_p_l5_long", pa.float64()),   # APC covariance-norm baseline, top L/5
    ("coevo_p_l_long", pa.float64()),
    ("coevo_mi_p_l5_long", pa.float64()),  # APC mutual-information baseline
    ("coevo_mi_p_l_long", pa.float64()),
    ("msa_depth", pa.int32()),           # A3M sequences (query included); null without A3M
    ("msa_neff", pa.float64()),          # Σ sequence weights (80% identity), as the features
]), "Per target: structure, confidence and contact metrics of a prediction against its native.")


EVALUATION_RESIDUES = TableSchema("evaluation_residues", 1, pa.schema([
    ("name", pa.string()),
    ("index", pa.int32()),               # 0-based position in the prediction
    ("aa", pa.string()),                 # predicted residue (one letter)
    ("native_residue", pa.string()),     # author number + insertion code of the matched native residue; "" if none
    ("native_aa", pa.string()),          # "" when unmatched
    ("plddt", pa.float32()),             # 0-100; NaN without confidence values
    ("lddt_ca", pa.float32()),           # true per-residue lDDT-Cα; NaN when unmatched or without scored pairs
]), "Per predicted residue: its native partner, pLDDT and true lDDT-Cα.")
