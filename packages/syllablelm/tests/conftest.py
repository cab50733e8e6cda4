"""Run this package's tests single-threaded: the models here are tiny, and on a loaded 2-core machine intra-op
threading makes small ops 20x slower."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _syllablelm_single_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
