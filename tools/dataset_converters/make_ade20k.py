"""Generate a small segmentation data set in the ADE20K layout:
:func:`mmcpvt.datasets.synthetic.ade20k.make_ade20k` from the command line
(``--help``: what it writes, and an example)."""
from mmcpvt.datasets.synthetic.ade20k import main

if __name__ == '__main__':
    main()
