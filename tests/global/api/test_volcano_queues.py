"""Volcano Queue documents on the REST API: round trip, hierarchy, Closed queues, fair share."""

from __future__ import annotations

import httpx
import yaml

from tests.factories import (
    create_cluster,
    create_queue,
    inventory,
    job_document,
    submit,
    volcano_queue,
)

YAML = {"Content-Type": "application/yaml"}

QUEUE_YAML = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: research
  labels:
    team: nlp
  annotations:
    owner: alice
spec:
  weight: 3
  reclaimable: false
  priority: 5
  capability:
    nvidia.com/gpu: 64
    cpu: "2000"
    memory: 16Ti
  deserved:
    nvidia.com/gpu: 32
    cpu: "1000"
  guarantee:
    resource:
      nvidia.com/gpu: 8
  type: training
  dequeueStrategy: traverse
  extendClusters:
    - name: gpu-east
      weight: 2
      capacity:
        nvidia.com/gpu: 32
  affinity:
    nodeGroupAffinity:
      requiredDuringSchedulingIgnoredDuringExecution: [h100-pool]
"""


async def test_a_volcano_queue_yaml_round_trips_unchanged(api: httpx.AsyncClient) -> None:
    created = await api.post("/api/v1/queues", content=QUEUE_YAML, headers=YAML)
    assert created.status_code == 201, created.text
    out = created.json()
    assert (out["weight"], out["gpuQuota"], out["priority"], out["reclaimable"]) == (
        3,
        64,
        5,
        False,
    )
    assert (out["state"], out["parent"], out["leaf"], out["guaranteeGpus"]) == (
        "Open",
        None,
        True,
        8,
    )
    back = await api.get("/api/v1/queues/research/document", headers={"Accept": "application/yaml"})
    assert back.headers["content-type"].startswith("application/yaml")
    document = yaml.safe_load(back.text)
    sent = yaml.safe_load(QUEUE_YAML)
    assert document["spec"] == sent["spec"]
    assert document["metadata"] == sent["metadata"]
    assert document["status"]["state"] == "Open"
    # Applying it again changes nothing; a replaced weight shows.
    document["spec"]["weight"] = 5
    del document["status"]
    again = await api.put("/api/v1/queues/research", json=document)
    assert again.status_code == 200, again.text
    assert again.json()["weight"] == 5 and again.json()["spec"]["extendClusters"][0]["weight"] == 2


async def test_bad_queue_documents_name_the_field(api: httpx.AsyncClient) -> None:
    cases = [
        (volcano_queue("q", weight=0), "spec.weight"),
        (
            volcano_queue("q", capability={"nvidia.com/gpu": "lots"}),
            'spec.capability["nvidia.com/gpu"]',
        ),
        (
            volcano_queue("q", deserved={"nvidia.com/gpu": 16}, capability={"nvidia.com/gpu": 8}),
            'spec.deserved["nvidia.com/gpu"]',
        ),
        (
            volcano_queue("q", guarantee={"resource": {"nvidia.com/gpu": 4}}),
            'spec.deserved["nvidia.com/gpu"]',
        ),
        # More GPUs than the 32-bit columns hold: 422, not a 500 from Postgres.
        (volcano_queue("q", capability={"nvidia.com/gpu": "100T"}), "spec.capability"),
        (volcano_queue("q", deserved={"nvidia.com/gpu": 10**15}), "spec.deserved"),
        (volcano_queue("q", parent="nope"), "spec.parent"),
        (volcano_queue("q", colour="red"), "spec.colour"),
        ({**volcano_queue("q"), "status": {"state": "Closing"}}, "status.state"),
        (
            {
                **volcano_queue("q"),
                "metadata": {
                    "name": "q",
                    "annotations": {
                        "volcano.sh/hierarchy": "root/a/q",
                        "volcano.sh/hierarchy-weights": "1/2",
                    },
                },
            },
            'metadata.annotations["volcano.sh/hierarchy-weights"]',
        ),
    ]
    for document, field in cases:
        response = await api.post("/api/v1/queues", json=document)
        assert response.status_code == 422, (field, response.text)
        causes = [c["field"] for c in response.json()["details"]["causes"]]
        assert field in causes, (field, causes)


async def test_a_closed_queue_refuses_jobs_and_keeps_its_own(api: httpx.AsyncClient) -> None:
    await create_queue(api, "llm")
    kept = (await submit(api, job_document("kept", queue="llm"))).json()
    closed = await api.patch("/api/v1/queues/llm", json={"state": "Closed"})
    assert closed.json()["state"] == "Closed"
    refused = await submit(api, job_document("late", queue="llm"))
    assert refused.status_code == 409
    assert refused.json()["message"] == (
        "queue 'llm' is Closed: it accepts no new jobs (its jobs keep running)"
    )
    job = (await api.get(f"/api/v1/jobs/{kept['uid']}")).json()
    assert job["state"] == "Pending"
    assert (await api.get("/api/v1/queues/llm")).json()["usage"]["activeJobs"] == 1
    # A Queue document with status.state Closed closes it too; Open reopens it.
    document = (await api.get("/api/v1/queues/llm/document")).json()
    document["status"] = {"state": "Open"}
    assert (await api.put("/api/v1/queues/llm", json=document)).json()["state"] == "Open"
    assert (await submit(api, job_document("late", queue="llm"))).status_code == 201


async def test_jobs_go_only_to_leaf_queues(api: httpx.AsyncClient) -> None:
    assert (
        await api.post("/api/v1/queues", json=volcano_queue("eng", weight=2))
    ).status_code == 201
    prod = await api.post("/api/v1/queues", json=volcano_queue("prod", parent="eng"))
    assert prod.status_code == 201 and prod.json()["parent"] == "eng"
    eng = (await api.get("/api/v1/queues/eng")).json()
    assert eng["leaf"] is False
    refused = await submit(api, job_document(queue="eng"))
    assert refused.status_code == 422
    assert refused.json()["details"]["causes"][0] == {
        "field": "spec.queue",
        "message": "queue 'eng' has child queues: jobs may be submitted only to leaf queues",
    }
    assert (await submit(api, job_document(queue="prod"))).status_code == 201
    # A queue holding unfinished jobs cannot become a parent; a parent cannot be deleted.
    child = await api.post("/api/v1/queues", json=volcano_queue("canary", parent="prod"))
    assert child.status_code == 409
    assert "unfinished jobs" in child.json()["message"]
    assert (await api.delete("/api/v1/queues/eng")).status_code == 409
    cycle = await api.put("/api/v1/queues/eng", json=volcano_queue("eng", parent="prod"))
    assert cycle.status_code == 422


async def test_hierarchy_annotations_make_the_path(api: httpx.AsyncClient) -> None:
    document = volcano_queue("dev")
    document["metadata"]["annotations"] = {
        "volcano.sh/hierarchy": "root/sci/dev",
        "volcano.sh/hierarchy-weights": "1/4/2",
    }
    created = (await api.post("/api/v1/queues", json=document)).json()
    assert (created["parent"], created["weight"]) == ("sci", 2)
    sci = (await api.get("/api/v1/queues/sci")).json()
    assert (sci["weight"], sci["leaf"], sci["parent"]) == (4, False, None)


async def test_fair_share_across_the_tree_is_shown_per_queue(api: httpx.AsyncClient) -> None:
    # 64 GPUs (one cluster of 8 nodes x 8). eng (weight 3, capability 40) over prod and dev;
    # research (weight 1). Each leaf asks for more than the fleet: eng would get 48 by weight
    # but is capped at 40; research gets the other 24; prod and dev split eng's 40 evenly.
    await create_cluster(api, "gpu-east")
    put = await api.put("/api/v1/clusters/gpu-east/inventory", json=inventory("gpu-east"))
    assert put.status_code in (200, 204), put.text
    for document in (
        volcano_queue("eng", weight=3, capability={"nvidia.com/gpu": 40}),
        volcano_queue("prod", parent="eng"),
        volcano_queue("dev", parent="eng"),
        volcano_queue("research"),
    ):
        assert (await api.post("/api/v1/queues", json=document)).status_code == 201
    for n, queue in enumerate(("prod", "dev", "research")):
        response = await submit(api, job_document(f"big{n}", queue=queue, replicas=10, gpus=8))
        assert response.status_code == 201, response.text
    got = {q["name"]: q for q in (await api.get("/api/v1/queues")).json()["items"]}
    assert {n: got[n]["deservedGpus"] for n in ("eng", "prod", "dev", "research")} == {
        "eng": 40,
        "prod": 20,
        "dev": 20,
        "research": 24,
    }
    assert got["prod"]["fairShareGpus"] == 20 and got["prod"]["allocatedGpus"] == 0
    assert got["prod"]["share"] == 0.0
