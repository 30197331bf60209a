"""Generate a small detection data set in the COCO 2017 layout:
:func:`mmcpvt.datasets.synthetic.coco.make_coco` from the command line
(``--help``: what it writes, and an example)."""
from mmcpvt.datasets.synthetic.coco import main

if __name__ == '__main__':
    main()
