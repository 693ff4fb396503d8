"""Infrastructure every layer may use: atomic files and config hashes (io), progress bars, quiet
mode, the device/thread/float32 environment, the sandbox that confines defense code, and the one
lazily imported RobustBench adapter."""
