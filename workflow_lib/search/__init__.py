"""Homology search: the database k-mer index and the prefilter that feeds the Viterbi stage."""
