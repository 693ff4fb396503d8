"""Training the zoo: ``bench train`` (driver) and ``bench train --verify`` (zoo_verify)."""
