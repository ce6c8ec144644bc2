"""What-if simulation: replay a job trace against described clusters and links through the
scheduler's queue order and the placement engine on a virtual clock (`vglobal simulate`)."""
