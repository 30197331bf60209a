from .cpvt import CPVT
from .cpvt_qk_only import CPVTQKOnly
from .pvt_peg import PVTPEG
from .swin_peg import SwinPEG

__all__ = ['CPVT', 'CPVTQKOnly', 'PVTPEG', 'SwinPEG']
