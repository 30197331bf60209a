import numpy as np
import pytest
import torch
from mmengine.logging import HistoryBuffer

import mmcpvt  # noqa: F401  (registers the allow-list)


class NotAllowed:
    pass


def test_mmengine_checkpoint_objects_load_with_weights_only(tmp_path):
    buf = HistoryBuffer()
    buf.update(1.5)
    obj = dict(
        message_hub=dict(log_scalars={'loss': buf}),
        arr=np.arange(6, dtype=np.float32).reshape(2, 3),
        scalar=np.float64(2.5),
        dtype=np.dtype('int64'),
        state_dict={'w': torch.ones(2)})
    path = tmp_path / 'ckpt.pth'
    torch.save(obj, path)
    loaded = torch.load(path, weights_only=True)
    assert loaded['message_hub']['log_scalars']['loss'].current() == 1.5
    np.testing.assert_array_equal(loaded['arr'], obj['arr'])
    assert loaded['scalar'] == 2.5 and loaded['dtype'] == np.dtype('int64')


def test_other_globals_are_still_refused(tmp_path):
    path = tmp_path / 'evil.pth'
    torch.save({'x': NotAllowed()}, path)
    with pytest.raises(Exception, match='Unsupported global'):
        torch.load(path, weights_only=True)


def test_getattr_is_restricted_to_history_buffer_statistics(tmp_path):
    import builtins
    path = tmp_path / 'getattr.pth'

    class Reach:  # pickles as getattr(np.ndarray, '__class__')
        def __reduce__(self):
            return builtins.getattr, (np.ndarray, '__class__')

    torch.save({'x': Reach()}, path)
    with pytest.raises(Exception, match='only HistoryBuffer statistics'):
        torch.load(path, weights_only=True)
