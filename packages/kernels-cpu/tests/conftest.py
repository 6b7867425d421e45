
from kernflow.core.testing.kernel_contract import all_cases


def pytest_generate_tests(metafunc):
    if "op_case" in metafunc.fixturenames:
        cases = all_cases()
        metafunc.parametrize("op_case", cases, ids=[c.id for c in cases])
