"""Structure prediction with a trained three-track network (``trackfold predict``).

- :mod:`.predict` -- feature dict -> network inputs -> backbone, pLDDT and 6D probabilities
  (:func:`~.predict.predict_many`, :class:`~.predict.PredictOptions`).
- :mod:`.stitch` -- crop-and-stitch for proteins longer than the window.
- :mod:`.outputs` -- the per-protein output files (layouts: :mod:`workflow_lib.schemas.prediction`).
- :mod:`.jobs` -- the body of ``trackfold predict``: batching, receipts and resume.
- :mod:`.cli` -- ``trackfold predict``'s arguments.
"""
