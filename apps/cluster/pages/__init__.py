"""The cluster mirror's pages: cluster queues, local queues, cohorts, resource flavors and each pool's nodes.

They sit above the mirror in the stack: the rest of apps.cluster imports core only, while the pages scope their rows
through apps.accounts.access and name them through apps.org (pools, projects), so the import contracts place this
package above org, beside apps.workloads, and keep the mirror from importing it.
"""
