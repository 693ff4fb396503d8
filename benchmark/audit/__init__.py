"""The rules that recompute a run without trusting the defense: certificate statistics, noise
independence, proofs of deterministic certificates, PREDICT replay, canaries, and the checker that
applies them to a submission or an entry."""
