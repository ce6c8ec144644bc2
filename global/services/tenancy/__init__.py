"""Who may use the fleet and how much: queues (Volcano Queues: weight, capability, deserved,
guarantee, hierarchy, state), priority classes, and bearer tokens with their roles."""
