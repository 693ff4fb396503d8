"""DeepG-style verification (Balunovic et al. 2019) and the CNN bound propagation shared with semanify/interval."""
