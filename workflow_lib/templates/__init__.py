"""Template stage: template database, HMM-HMM template search and its E-values.

Templates searched as HHsearch searches them, with its HMM-HMM Viterbi and secondary structure (Söding 2005,
Bioinformatics 21:951), and read as trRosetta's 6D geometry (Yang et al. 2020, PNAS 117:1496); DESIGN.md "The
aligner", "Templates".

- :mod:`.build` -- :func:`build_template_db`: structures -> chains, coordinates, DSSP, profiles; manifest last.
- :mod:`.database` -- :func:`load_template_db`: profiles and structures of a built database.
- :mod:`.calibration` -- per-query Gumbel null model on shuffled templates: P-values and E-values.
- :mod:`.search` -- :func:`search_templates`: profile-profile Viterbi of a query against every template.
- :mod:`.cli` -- ``trackfold templates build | search | sequences``.

The template features (6D maps and 1D scores on the query grid) are built by
:mod:`workflow_lib.features.templates`; the database files and the hits table are declared in
:mod:`workflow_lib.schemas.templates`.
"""

from workflow_lib.templates.build import build_template_db, read_template_manifest
from workflow_lib.templates.calibration import NullModel, decoy_profiles, fit_gumbel, fit_null
from workflow_lib.templates.database import TemplateDatabase, TemplateStructure, load_template_db
from workflow_lib.templates.search import aligned_pairs, search_templates, write_hits

__all__ = [
    "NullModel", "TemplateDatabase", "TemplateStructure", "aligned_pairs", "build_template_db", "decoy_profiles", "fit_gumbel", "fit_null",
    "load_template_db", "read_template_manifest", "search_templates", "write_hits",
]
