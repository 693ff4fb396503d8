"""Model architectures, the training loop and the checkpoint store (cache + packaged zoo)."""
