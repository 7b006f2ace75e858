"""Limits of the current GPU, read once when the module is imported (as several engines size their grids)."""
import torch

_PROPS = torch.cuda.get_device_properties(torch.cuda.current_device())
NUM_SMS = _PROPS.multi_processor_count
