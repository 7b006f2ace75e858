"""The GitHub App: `kernelsmith serve` (FastAPI under uvicorn)."""
