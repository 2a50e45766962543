"""The benchmark's CPU accounting: what it measures, and the bound the report sets beside each target."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from bench import cpu, memory
from bench.report import engine_cpu_table, targets
from tests.waiting import eventually

BURN = 0.3  # CPU-seconds


def _burn(seconds: float) -> None:
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


def test_a_process_the_step_runs_and_waits_for_counts_as_its_client_cpu():
    with cpu.CpuMeter() as meter:
        subprocess.run([sys.executable, "-c", f"import time\nt = time.process_time()\n"
                        f"while time.process_time() - t < {BURN}: pass"], check=True)
    assert meter.children >= BURN * 0.9
    assert meter.own < BURN  # the busy loop ran in the child, not here


def test_a_processs_cpu_is_read_from_proc_and_ends_at_zero_once_it_is_gone():
    before = cpu.process_seconds(os.getpid())
    _burn(BURN)
    assert cpu.process_seconds(os.getpid()) - before >= BURN * 0.9
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its /proc entry is gone
    assert cpu.process_seconds(gone.pid) == 0.0


def test_each_time_target_names_the_least_ratio_its_cpu_seconds_allow():
    cores, floor = 2, 10.0
    ours_cpu = [{"client": 30.0, "engines": 10.0}, {"client": 32.0, "engines": 10.0}, {"client": 28.0, "engines": 10.0}]
    report = {"machine": {"cores": cores},
              "b1": {"300": {"direct": 3.0, "noop": floor, "ours": 21.0, "cpu": {"ours": ours_cpu}}},
              "b2": {"preview": [3.0], "up": [3.0]}, "b2_noop": {"preview": [2.0], "up": [2.5]},
              "steady_cpu": {"ours": {"preview": [{"client": 3.0, "engines": 0.2}]}}}
    found = targets(report)
    least = 40.0 / cores / floor  # the median run's 30 + 10 CPU-s over the cores, against max(a, b)
    assert found["B1 N=300"]["met"] is False
    assert f"CPU bound {least:.2f} x" in found["B1 N=300"]["detail"]
    assert f"CPU bound {3.2 / cores / 2.0:.2f} x" in found["B2 preview"]["detail"]
    assert "CPU bound" not in found["B2 up"]["detail"]  # no CPU measured for it: no bound claimed


def test_each_engine_is_metered_apart_and_reported_at_the_largest_size():
    with cpu.CpuMeter() as meter:
        pass
    assert set(meter.by_engine) == set(cpu.engine_pids())
    assert meter.engines == sum(meter.by_engine.values())
    runs = lambda *seconds: [{"client": 1.0, "engines": s, "by_engine": {"postgres": s, "kafka": 2 * s}} for s in seconds]
    report = {"b1": {"30": {"cpu": {"ours": runs(9.0)}},
                     "300": {"cpu": {"ours": runs(1.0, 4.0, 2.0), "direct": runs(0.5), "noop": runs(0.25)}}}}
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in engine_cpu_table(report)
             if line.startswith("| ")]
    assert cells[0][0] == "engine" and "N=300" in engine_cpu_table(report)[0]
    assert cells[1:] == [["kafka", "4.00", "1.00", "0.50"], ["postgres", "2.00", "0.50", "0.25"]]
    # A run that stopped before any size was measured still prints its report (and the error).
    assert engine_cpu_table({"b1": {}}) == []


def test_an_engines_cpu_counts_a_child_it_has_not_waited_for():
    """PostgreSQL's backend of a session that just closed: its time reaches the engine's own figures
    only once the postmaster reaps it, often after the step has ended."""
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time\\nt = time.process_time()\\n"
        f"while time.process_time() - t < {BURN}: pass\\ntime.sleep(30)'])\n"
        "print(child.pid, flush=True)\ntime.sleep(30)\n")], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        eventually(lambda: cpu.process_seconds(child) >= BURN * 0.9, 20, f"the child {child} to burn its CPU time")
        assert cpu.tree_seconds(parent.pid) - cpu.process_seconds(parent.pid) >= BURN * 0.9
    finally:
        for process in memory.descendants(parent.pid):
            os.kill(process, signal.SIGKILL)
        parent.kill()
        parent.wait()
