/**
 * The active tenant's projects (paged, oldest first) and the form to create one
 * (POST /admin/v1/projects: `name`, `environment`).
 */
import { useState } from 'preact/hooks';
import { api, type components, must } from '../api.ts';
import { paths } from '../routes.ts';
import { can, useSession } from '../session.tsx';
import {
  Badge,
  Done,
  Empty,
  ErrorNote,
  Field,
  More,
  Page,
  Select,
  Table,
  Time,
  useAction,
  usePaged,
} from '../ui/kit.tsx';
import '../ui/project.css';

type Environment = components['schemas']['Project']['environment'];
type ProjectInfo = components['schemas']['Project'];

const ENVIRONMENTS: Array<{ value: Environment; label: string }> = [
  { value: 'production', label: 'Production' },
  { value: 'staging', label: 'Staging' },
  { value: 'development', label: 'Development' },
];

function CreateProject({ onCreated }: { onCreated: (project: ProjectInfo) => void }) {
  const [name, setName] = useState('');
  const [environment, setEnvironment] = useState<Environment>('production');
  const create = useAction(async () => {
    const project = await must(api.POST('/admin/v1/projects', { body: { name: name.trim(), environment } }));
    setName('');
    onCreated(project);
  });
  return (
    <form
      class="card"
      aria-labelledby="create-project"
      onSubmit={(e) => {
        e.preventDefault();
        void create.run();
      }}
    >
      <h2 id="create-project">Create a project</h2>
      <div class="prj-form-grid">
        <Field
          label="Name"
          name="name"
          required
          maxLength={64}
          pattern="[a-z0-9][a-z0-9\-]*"
          autoComplete="off"
          hint="Lowercase letters, digits and hyphens, starting with a letter or digit; unique in the tenant."
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
        />
        <Select
          label="Environment"
          name="environment"
          value={environment}
          options={ENVIRONMENTS}
          onChange={(e) => setEnvironment(e.currentTarget.value as Environment)}
        />
      </div>
      <ErrorNote error={create.error} />
      <button type="submit" disabled={create.busy}>
        {create.busy ? 'Working…' : 'Create project'}
      </button>
    </form>
  );
}

export function Projects() {
  const { session } = useSession();
  const [created, setCreated] = useState<ProjectInfo>();
  const list = usePaged(async (cursor) => {
    const page = await must(api.GET('/admin/v1/projects', { params: { query: { cursor } } }));
    return { items: page.projects, next: page.next_cursor };
  });
  const writable = can(session, 'projects:write');

  return (
    <Page title="Projects">
      <p>
        A project holds API keys, the credentials they issue, bots, an IP allowlist and webhooks. Open one to
        manage them.
      </p>
      {created && (
        <Done>
          Project <a href={paths.project(created.id)}>{created.name}</a> created. Open it to create its first
          API key.
        </Done>
      )}
      <h2>All projects</h2>
      <ErrorNote error={list.error} />
      {list.loading && list.items.length === 0 && !list.error && <p class="muted">Loading projects…</p>}
      {!list.loading && !list.error && list.items.length === 0 && (
        <Empty title="Create your first project">
          {writable
            ? 'Give it a name below; then create an API key in it to issue relay credentials.'
            : 'Your role cannot create projects: ask an owner, admin or developer of this tenant.'}
        </Empty>
      )}
      {list.items.length > 0 && (
        <Table caption="Projects of this tenant" head={['Name', 'Environment', 'Id', 'Created']}>
          {list.items.map((p) => (
            <tr key={p.id}>
              <td>
                <a href={paths.project(p.id)}>{p.name}</a>
              </td>
              <td>
                <Badge tone={p.environment === 'production' ? 'ok' : 'info'}>{p.environment}</Badge>
              </td>
              <td>
                <code>{p.id}</code>
              </td>
              <td>
                <Time at={p.created_at} />
              </td>
            </tr>
          ))}
        </Table>
      )}
      <More list={list} />
      {writable && (
        <CreateProject
          onCreated={(p) => {
            setCreated(p);
            list.reload();
          }}
        />
      )}
    </Page>
  );
}
