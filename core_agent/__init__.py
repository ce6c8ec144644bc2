"""core_agent: the per-cluster agent. It streams its cluster's inventory, heartbeats and share
reports to the Global over gRPC (`client.py`) and turns the shares it is assigned into Volcano
Jobs; the inventory comes from a real cluster (`kubernetes/`, through kubernetes-asyncio) or a
simulated one (`simulated/`). It imports the protocol (`volcano_global.rpc`) and the job-spec
package (`volcano_global.jobspec`), never the server's internals (an import-linter contract).
"""
