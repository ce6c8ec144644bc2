"""The OpenAPI document keeps stable operation ids (the console and clients rely on them)."""

from __future__ import annotations

import httpx

EXPECTED = {
    "registerCluster",
    "listClusters",
    "getCluster",
    "deleteCluster",
    "rotateClusterToken",
    "replaceClusterInventory",
    "getClusterTopology",
    "listClusterEvents",
    "createLink",
    "listLinks",
    "deleteLink",
    "createQueue",
    "listQueues",
    "getQueue",
    "updateQueue",
    "deleteQueue",
    "applyQueue",
    "getQueueDocument",
    "createPriorityClass",
    "applyPriorityClass",
    "listPriorityClasses",
    "getPriorityClass",
    "deletePriorityClass",
    "submitJob",
    "applyDocuments",
    "listJobs",
    "getJob",
    "cancelJob",
    "deleteJob",
    "listJobEvents",
    "previewJob",
    "reportJobMeasurements",
    "reportJobCheckpoint",
    "listDataSources",
    "getDataSource",
    "deleteDataSource",
    "listDataSourceClaims",
    "deleteDataSourceClaim",
    "listStaging",
    "getJobData",
    "createToken",
    "listTokens",
    "revokeToken",
    "listAudit",
    "getOverview",
    "listSchedulingRounds",
    "getHistory",
    "healthz",
    "readyz",
    "metrics",
}


async def test_operation_ids_are_stable(api: httpx.AsyncClient) -> None:
    spec = (await api.get("/openapi.json")).json()
    ids = {op["operationId"] for path in spec["paths"].values() for op in path.values()}
    assert ids == EXPECTED
    submit = spec["paths"]["/api/v1/jobs"]["post"]
    assert set(submit["requestBody"]["content"]) == {"application/yaml", "application/json"}
    assert {"409", "413", "415", "422"} <= set(submit["responses"])
