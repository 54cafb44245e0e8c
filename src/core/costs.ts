/**
 * Credits each operation costs, by operation id. An operation listed here runs in one transaction with
 * the debit of its organization's balance; with too few credits it fails with 402 and writes nothing.
 */
export const OPERATION_COSTS: Readonly<Record<string, number>> = {
  'automations.create': 1, // its instructions are evaluated
};
