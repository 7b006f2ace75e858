"""tinyserve: a tiny serving-engine kernel package (example target repo for kernelsmith)."""
