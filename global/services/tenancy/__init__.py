"""Who may use the fleet and how much: queues (weight, GPU quota, priority) and bearer tokens
with their roles."""
