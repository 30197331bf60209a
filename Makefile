# mmcpvt: `make demo` runs the main job on built-in data, `make test` the tests,
# `make reproduce` the digit-canvas reproduction (docs/reproduction.md),
# `make reproduce-controls` its controls of the PEG (taking back the runs of
# `make reproduce` where they exist), `make reproduce-confirm` the default
# run again on seeds 5-9, which chose nothing of the recipe, `make
# reproduce-rope` the PEG beside 2-D RoPE (taking back the default run's).
# Every target does its own set-up and is idempotent. The suite on the GPU
# machines' torch and Python, in a second environment:
#   make test VENV=.venv-torch2.11 PYTHON=python3.12 TORCH_REQS=requirements/torch-2.11.txt
PYTHON ?= python3
VENV ?= .venv
TORCH_REQS ?= requirements/torch.txt
PY := $(VENV)/bin/python
STAMP := $(VENV)/.mmcpvt-installed
REQS := setup.py $(wildcard requirements/*.txt) tools/install/build_mmcv.sh

.PHONY: install test demo reproduce reproduce-controls reproduce-confirm \
	reproduce-rope clean

install: $(STAMP)

$(STAMP): $(REQS)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@echo "[install] torch + torchvision (several GB on the first install)"
	$(PY) -m pip install --quiet -r $(TORCH_REQS) -r requirements/build.txt
	tools/install/build_mmcv.sh $(PY)
	@echo "[install] OpenMMLab stack, mim and test tools (tested versions: requirements/constraints.txt)"
	$(PY) -m pip install --quiet -c requirements/constraints.txt \
		-r requirements/runtime.txt -r requirements/openmmlab.txt \
		-r requirements/mim.txt -r requirements/rope.txt -r requirements/tests.txt
	$(PY) -m pip install --quiet --no-build-isolation --no-deps -e .
	$(PY) -c "import mmcpvt, mmcv.ops, mmdet, mmseg, mmpretrain; print('[install] ok: mmcpvt', mmcpvt.__version__)"
	@touch $(STAMP)

# The suite writes checkpoints and work dirs under pytest's tmp_path (GBs):
# only those of failed tests are kept.
test: install
	$(PY) -m pytest tests --durations=30 -o tmp_path_retention_policy=failed

demo: install
	$(PY) demo/demo.py

reproduce: install
	$(PY) projects/digits_canvas/digits_canvas.py --instruments

reproduce-confirm: install
	$(PY) projects/digits_canvas/digits_canvas.py --seeds 5 6 7 8 9 \
		--out-dir work_dirs/reproduction_confirm

reproduce-controls: install
	$(PY) projects/digits_canvas/digits_canvas.py --variants controls --instruments \
		--reuse work_dirs/reproduction --out-dir work_dirs/reproduction_controls

reproduce-rope: install
	$(PY) projects/digits_canvas/digits_canvas.py --variants rope --instruments \
		--reuse work_dirs/reproduction --out-dir work_dirs/reproduction_rope

clean:
	rm -rf $(VENV) work_dirs data
