import pytest

from kernflow.core.testing.kernel_contract import all_cases


def pytest_generate_tests(metafunc):
    if "op_case" in metafunc.fixturenames:
        cases = all_cases()
        metafunc.parametrize("op_case", cases, ids=[c.id for c in cases])


@pytest.fixture
def gpu_registry():
    """The process's kernel registry (GPU kernels are registered when a GPU is present)."""
    from kernflow.core.plugins import manager
    return manager.registries().kernels
