"""LocoGS codec: Morton ordering, lossless fp16 positions, quantised attributes and field, one container file."""

from .container import SizeReport, compress, decompress, read_container
from .morton import morton_codes, morton_order
from .positions import decode_positions, encode_positions
from .quantize import dequantize, quantize_uniform

__all__ = [
    "SizeReport",
    "compress",
    "decode_positions",
    "decompress",
    "dequantize",
    "encode_positions",
    "morton_codes",
    "morton_order",
    "quantize_uniform",
    "read_container",
]
