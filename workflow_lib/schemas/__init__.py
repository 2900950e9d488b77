"""Every data contract of the workflow, declared once: the Parquet tables and npz arrays passed between stages.

:mod:`.io` holds the declaration types (:class:`~.io.TableSchema`, :class:`~.io.NpzSchema` with named
dimensions) and the one validating reader and atomic writer of each kind; the family modules hold the
declarations; :mod:`.catalog` lists them all by name. Every file below is written through
:func:`~.io.write_table` / :func:`~.io.write_npz` (a temporary file, then a rename) and read back through
:func:`~.io.read_table` / :func:`~.io.read_npz`, which check its ``name/version`` tag, columns, keys, dtypes and
shapes and name the file when something is wrong.

=====================================================================  ============================  =============
file (under ``results/``)                                              layout                        module
=====================================================================  ============================  =============
``db/{database}/shard_NNN.parquet``                                    ``db_shard``                  :mod:`.db`
``db/{database}/shard_NNN.kmer.npz``                                   ``kmer_index``                :mod:`.db`
``db/{database}.profiles/profiles_NNN.npz``                            ``profile_db_arrays``         :mod:`.db`
``db/{database}.profiles/members_NNN.parquet``                         ``profile_db_members``        :mod:`.db`
``{proteome}/chunks/chunks.parquet``                                   ``chunks``                    :mod:`.db`
``{proteome}/search/chunk_NNNN/iter_I/queries.npz`` (temp)             ``search_queries``            :mod:`.search`
``{proteome}/search/chunk_NNNN/iter_I/shard_NNN.hits.parquet`` (temp)  ``hits``                      :mod:`.search`
``{proteome}/search/chunk_NNNN/iter_I/shard_NNN.times.parquet`` (temp) ``search_times``              :mod:`.search`
``{proteome}/search/chunk_NNNN/iter_I/state.parquet``                  ``msa_state``                 :mod:`.search`
``{proteome}/msa/chunk_NNNN.stats.parquet``                            ``msa_stats``                 :mod:`.search`
``templates/{template_db}/chains.parquet``                             ``template_chains``           :mod:`.templates`
``templates/{template_db}/arrays.npz``                                 ``template_arrays``           :mod:`.templates`
``templates/{template_db}_msas/msa_stats.parquet``                     ``msa_stats``                 :mod:`.search`
``{proteome}/templates/{protein}.hits.parquet``                        ``template_hits``             :mod:`.templates`
``{proteome}/templates/chunk_NNNN.stats.parquet``                      ``template_search_stats``     :mod:`.templates`
``{proteome}/features/{protein}.npz``                                  ``features``                  :mod:`.features`
``{proteome}/features/chunk_NNNN.stats.parquet``                       ``feature_stats``             :mod:`.features`
``{proteome}/structures/{protein}.pred.npz``                           ``prediction``                :mod:`.prediction`
``{proteome}/structures/{protein}.residues.parquet``                   ``predicted_residues``        :mod:`.prediction`
``{proteome}/structures/{protein}.embeddings.npz`` (``--embeddings``)  ``embeddings``                :mod:`.prediction`
``{proteome}/structures/chunk_NNNN.stats.parquet``                     ``prediction_stats``          :mod:`.prediction`
``{proteome}/summary.parquet``                                         ``summary``                   :mod:`.report`
``{proteome}/runtime.parquet``                                         ``runtime``                   :mod:`.report`
``train/{name}/data/chains.parquet``                                   ``training_chains``           :mod:`.training`
``train/{name}/msa/batch_NNN/msa_stats.parquet``                       ``msa_stats``                 :mod:`.search`
``train/{name}/features/{chain}.npz``                                  ``features``                  :mod:`.features`
``train/{name}/run/metrics.parquet``                                   ``training_metrics``          :mod:`.training`
``train/{name}/run/validation.parquet``                                ``validation_chains``         :mod:`.training`
``train/{name}/predictions/{chain}.pred.npz``                          ``prediction``                :mod:`.prediction`
``train/{name}/evaluation/evaluation.parquet``                         ``evaluation``                :mod:`.evaluation`
``train/{name}/evaluation/evaluation_residues.parquet``                ``evaluation_residues``       :mod:`.evaluation`
``trackfold train-pack --out PACK`` (a training pack)                  ``training_pack``             :mod:`.training`
=====================================================================  ============================  =============

Files in standard formats are not declared here: FASTA (chunks), A3M (MSAs), PDB and mmCIF (structures), the
per-protein confidence JSON, the summary TSV, JSON manifests and model cards; nor the training state ``run/train_state.pt`` and checkpoints (torch tensors read
with ``weights_only=True``, see :mod:`workflow_lib.model.checkpoint`).

This ``__init__`` imports nothing, so a stage that reads one family does not import the others.
"""
