"""The `%job` widget's "Monarch dashboard" link (pure view data → HTML)."""

from __future__ import annotations

from monarch_jupyter.jobs.status import NOT_RUNNING, RUNNING, JobStatus
from monarch_jupyter.widgets.job import dashboard_link_html, details_html, job_view


def status(state: str = RUNNING, **urls: str | None) -> JobStatus:
    return JobStatus(
        context="exp", state=state, apply_id="a'1", urls={"telemetry": None, "dashboard": None, **urls}
    )


def test_a_running_telemetry_job_links_its_dashboard_by_apply_id() -> None:
    view = job_view(status(telemetry="http://127.0.0.1:9000"))
    link = dashboard_link_html(view)
    assert "data-monarch-dashboard='a&#x27;1'" in link and "data-monarch-context='exp'" in link
    assert "href='http://127.0.0.1:9000'" in link and ">Monarch dashboard</a>" in link
    assert link in details_html(view)
    # the job's own dashboard wins over the telemetry URL serving the same app
    both = job_view(status(telemetry="http://127.0.0.1:9000", dashboard="http://localhost:8265"))
    assert "href='http://localhost:8265'" in dashboard_link_html(both)


def test_no_link_without_a_running_dashboard() -> None:
    assert dashboard_link_html(job_view(status())) == ""
    assert dashboard_link_html(job_view(status(NOT_RUNNING, telemetry="http://127.0.0.1:9000"))) == ""
    assert dashboard_link_html(job_view(status(admin="http://localhost:1729"))) == ""
    assert "monarch-job-dashboard" not in details_html(job_view(status()))
