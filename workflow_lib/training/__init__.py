"""Training the three-track network (:mod:`workflow_lib.model`) on experimental chains.

Two steps, each a command (:mod:`.cli`, :mod:`.jobs`): ``trackfold train-data`` then ``trackfold train``.

- :mod:`.data` -- usable chains of structure files, identity clusters, the split (``chains.parquet``).
- :mod:`.examples` -- a chain's true backbone; network inputs and loss targets of a crop.
- :mod:`.losses` -- distogram cross-entropy, FAPE and pLDDT losses.
- :mod:`.settings` -- optimisation and schedule settings shared with the workflow's ``train`` section (torch-free).
- :mod:`.config` -- :class:`~.config.TrainConfig`.
- :mod:`.loop` -- :func:`~.loop.train`: sampling, AdamW with warm-up and cosine decay, resume.
- :mod:`.state` -- the resumable training state ``train_state.pt``.
- :mod:`.validation` -- per-chain validation metrics (``validation.parquet``).
- :mod:`.metrics` -- the training curve (``metrics.parquet``, ``learning_curve.png``).
- :mod:`.jobs` -- the bodies of ``trackfold train-data``, ``train``, ``train-pack`` and of the training
  workflow's glue (``train-batch``, ``train-select``, ``train-hits``, ``train-targets``, ``train-card``).
- :mod:`.cli` -- those commands' arguments.
- :mod:`.card` -- the model card of a training-workflow run.

The tables' layouts are declared in :mod:`workflow_lib.schemas.training`. This ``__init__`` imports nothing, so
the workflow reads :mod:`.settings` without torch.
"""
