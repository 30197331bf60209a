from .cpvt import CPVT

__all__ = ['CPVT']
