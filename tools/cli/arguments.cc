// TEMPORARY (helper task)
