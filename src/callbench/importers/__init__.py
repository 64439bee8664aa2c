"""Other benchmarks' tasks as callbench bundles (``callbench import``). One subpackage per source
benchmark; each reads the source's data files only (never its code) and writes a normal bundle."""
