"""Generate a small data set in the ImageNet-1k layout:
:func:`mmcpvt.datasets.synthetic.imagenet.make_imagenet` from the command line
(``--help``: what it writes, and an example)."""
from mmcpvt.datasets.synthetic.imagenet import main

if __name__ == '__main__':
    main()
