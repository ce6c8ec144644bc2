"""Jobs as users see them: submission (checked, then group-committed by the job writer),
cancellation, what the API shows (views), and what a job's processes measure."""
