"""`rbl report`: statistics across rounds, the paper's figures and a single-file HTML report."""
