"""kf.app.run and kf.logging (TF1's tf.app.run and tf.logging)."""

import logging

import pytest

import kernflow.core as kf


def test_app_run_calls_main_with_argv_and_exits_with_its_result():
    seen = []
    with pytest.raises(SystemExit) as e:
        kf.app.run(main=lambda argv: seen.append(argv) or 3, argv=["prog", "--x"])
    assert seen == [["prog", "--x"]] and e.value.code == 3


def test_logging_levels_verbosity_and_counted_logs(caplog):
    assert (kf.logging.DEBUG, kf.logging.INFO, kf.logging.WARN, kf.logging.ERROR, kf.logging.FATAL) == \
        (10, 20, 30, 40, 50)
    logger = logging.getLogger("kernflow")
    level, handlers = logger.level, list(logger.handlers)
    try:
        kf.logging.set_verbosity(kf.logging.INFO)
        assert kf.logging.get_verbosity() == kf.logging.INFO
        with caplog.at_level(logging.INFO, logger="kernflow"):
            kf.logging.info("step %d", 7)
            kf.logging.debug("hidden")
            for i in range(5):
                kf.logging.log_every_n(kf.logging.INFO, "every %d", 2, i)
            for i in range(5):
                kf.logging.log_first_n(kf.logging.WARN, "first %d", 2, i)
            kf.logging.log_if(kf.logging.INFO, "if %s", False, "no")
            kf.logging.log_if(kf.logging.INFO, "if %s", True, "yes")
        got = [r.getMessage() for r in caplog.records if r.name == "kernflow"]
        assert got == ["step 7", "every 0", "every 2", "every 4", "first 0", "first 1", "if yes"]
    finally:   # the library's loggers ("kernflow.*") must see the level the other tests expect
        logger.setLevel(level)
        for h in logger.handlers[:]:
            if h not in handlers:
                logger.removeHandler(h)
