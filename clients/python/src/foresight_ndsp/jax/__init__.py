"""Read a compiled JAX step's collectives and announce them over NDSP."""
