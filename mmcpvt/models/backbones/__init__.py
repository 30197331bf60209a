from .cpvt import CPVT
from .pvt_peg import PVTPEG
from .swin_peg import SwinPEG

__all__ = ['CPVT', 'PVTPEG', 'SwinPEG']
